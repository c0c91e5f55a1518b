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

__all__ = ["SbsField", "sbs_field"]


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
