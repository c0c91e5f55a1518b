"""A synthetic in-situ sequencing field in the form spaCR's decode takes it, for comparing spaCR
patched and not on the same pixels (the tests and the spaCR benchmark).

What makes it a fair input is what spaCR's decode does with it: spots of a few pixels on a
background with camera noise, each cycle shifted by a few pixels against the reference and each
channel by one or two within its cycle (so every registration has a real answer to find), one base
lit per spot per cycle, and nuclei around the spots for the reads to be attributed to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["AnchorField", "SbsField", "anchor_field", "sbs_field"]


@dataclass(frozen=True)
class SbsField:
    """One field: ``planes[(cycle, channel)]`` float32 images, and the decode task naming them.

    :param planes: the images, keyed by the source the task names.
    :param task: spaCR 1.5's ``_decode_field`` task (``_read_plane`` is what reads a source).
    """

    planes: dict[tuple[int, int], np.ndarray]
    task: dict[str, Any]

    def read_plane(self, source: Any, unreadable: Any = None) -> np.ndarray:
        """A stand-in for spaCR's TIFF reader: the plane the source names."""
        return self.planes[tuple(source)]


def _spots(shape: tuple[int, int], centres: np.ndarray, amplitudes: np.ndarray, sigma: float) -> np.ndarray:
    image = np.zeros(shape, np.float32)
    reach = int(3 * sigma) + 1
    offsets = np.arange(-reach, reach + 1)
    kernel = np.exp(-(offsets[:, None] ** 2 + offsets[None, :] ** 2) / (2 * sigma**2)).astype(np.float32)
    for (y, x), amplitude in zip(centres, amplitudes, strict=True):
        image[y - reach:y + reach + 1, x - reach:x + reach + 1] += amplitude * kernel
    return image


def sbs_field(size: int = 1480, cycles: int = 11, channels: int = 4, spots: int = 3000,
              nuclei: int = 600, seed: int = 0) -> SbsField:
    """Draw one field.

    :param size: the field's edge in pixels (spaCR's sequencing tiles are 1480).
    :param cycles: sequencing cycles; the first is the reference.
    :param channels: base channels per cycle.
    :param spots: reads placed in the field.
    :param nuclei: nuclei (centroids and areas) the reads are attributed to.
    :param seed: the generator's seed: the same seed, the same field.
    """
    rng = np.random.default_rng(seed)
    margin = 40
    centres = rng.integers(margin, size - margin, (spots, 2))
    bases = rng.integers(0, channels, (cycles, spots))
    cycle_shift = rng.integers(-6, 7, (cycles, 2))
    cycle_shift[0] = 0
    planes: dict[tuple[int, int], np.ndarray] = {}
    for cycle in range(cycles):
        for channel in range(channels):
            lit = bases[cycle] == channel
            amplitude = np.where(lit, rng.uniform(2500, 6000, spots), rng.uniform(0, 400, spots))
            shift = cycle_shift[cycle] + (channel % 2, channel // 2)
            image = _spots((size, size), centres, amplitude.astype(np.float32), 1.4)
            image = np.roll(image, tuple(int(v) for v in shift), axis=(0, 1))
            image += rng.normal(600, 40, (size, size)).astype(np.float32)
            planes[(cycle, channel)] = image.astype(np.float32)
    centroids = rng.uniform(margin, size - margin, (nuclei, 2))
    task = {
        "site": 1,
        "planes": {cycle: [(cycle, channel) for channel in range(channels)] for cycle in range(cycles)},
        "cycles": list(range(cycles)),
        "reference": 0,
        "centroids": centroids,
        "areas": rng.uniform(150, 450, nuclei),
        "ids": np.arange(1, nuclei + 1, dtype=np.int64),
        "owned": np.ones(nuclei, dtype=bool),
        "gpu": False,
        "store_reads": True,
    }
    return SbsField(planes, task)


@dataclass(frozen=True)
class AnchorField:
    """One anchor field of spaCR's merge: the phenotype field's nuclei and the sequencing window's.

    :param source: ``(N, 2)`` phenotype nuclear centres ``(y, x)``, in phenotype pixels.
    :param target: ``(M, 2)`` sequencing nuclear centres, in sequencing pixels.
    :param scale: sequencing pixels per phenotype pixel (what spaCR's ``expected_scale`` is).
    :param degrees: the rotation the source was drawn under.
    :param translation: where the source's origin lands in the target's frame.
    """

    source: np.ndarray
    target: np.ndarray
    scale: float
    degrees: float
    translation: np.ndarray


def anchor_field(sources: int = 600, targets: int = 2678, scale: float = 0.5, degrees: float = 2.0,
                 noise: float = 0.7, outliers: float = 0.15, seed: int = 0) -> AnchorField:
    """Draw one anchor field: a sequencing window of nuclei, and a phenotype field covering part of it.

    The phenotype field sees the sequencing nuclei inside its footprint, moved by a similarity
    transform (the magnification ratio, a small rotation of the stage, a translation) and jittered by
    the centroid's noise, plus nuclei the other acquisition missed (``outliers``, a fraction of
    ``sources``): what spaCR's ``align_phenotype_to_sbs`` has to find its transform in.

    :param sources: phenotype nuclei.
    :param targets: sequencing nuclei in the window.
    :param scale: sequencing pixels per phenotype pixel.
    :param degrees: the rotation between the acquisitions.
    :param noise: the centroids' jitter, in sequencing pixels (standard deviation).
    :param outliers: the fraction of phenotype nuclei with no sequencing partner.
    :param seed: the generator's seed.
    """
    rng = np.random.default_rng(seed)
    window = 3000.0
    target = rng.uniform(0.0, window, (targets, 2))
    shared = round(sources * (1.0 - outliers))
    # the footprint's side, so that it holds ``shared`` of the window's nuclei on average
    side = window * float(np.sqrt(shared / targets))
    corner = rng.uniform(0.0, window - side, 2)
    inside = np.flatnonzero(np.all((target >= corner) & (target < corner + side), axis=1))
    chosen = rng.permutation(inside)[:shared]
    angle = np.radians(degrees)
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    translation = corner - np.array([side * 0.02, side * 0.02])
    seen = target[chosen] + rng.normal(0.0, noise, (chosen.size, 2))
    # target = scale * rotation @ source + translation, solved for the source
    moved = ((seen - translation) @ rotation) / scale
    extent = side / scale
    missed = rng.uniform(0.0, extent, (sources - chosen.size, 2))
    source = rng.permutation(np.concatenate([moved, missed]))
    return AnchorField(source, target, float(scale), float(degrees), translation)
