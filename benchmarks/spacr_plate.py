"""A synthetic plate of TIFF tiles that every phase of spaCR 1.5.1.5's ``run_ops`` does real work on.

One well, written the way spaCR's OPS engine reads an acquisition:

- SEQUENCING at 10X: ``sites`` overlapping tiles of ``size`` px on spaCR's round-well raster
  (``spacr.ops_layout.round_well_layout``; 5, 9, 13, 21, ... sites), cycle 1 as one five-plane
  ``DAPI-CY3-A594-CY5-CY7`` stack, every later cycle as four single-channel files. Every cycle after
  the first is shifted as a whole, and some of its channels again on their own, so the decode's
  cycle and channel registrations have something to find.
- PHENOTYPE at 20X, no cycle in the names: twice the pixels over half the field (spaCR's scale of
  0.25), on a round-well raster of half the sequencing pitch, the whole acquisition rotated by a
  fraction of a degree, so the phenotype phase has anchors to align and a raster to fit.
- NUCLEI as Gaussian blobs on a jittered grid (one per 24 x 24 px at 10X: about 28,000 under the
  full 3 x 3 x 1480^2 well), each with a barcode from a guide library, and three READS around its
  rim: one bright spot per cycle in the channel of that cycle's base.

Everything is drawn from one seed, so two calls with the same arguments write the same bytes. The
segmentation is not part of the plate: :class:`ThresholdModel` labels the nuclear composite where
spaCR would ask Cellpose, and ``install_threshold_model`` puts it in place of
``spacr.ops_engine._cellpose_model`` for a process that has no Cellpose weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BASES = ("G", "T", "A", "C")
"""The base each sequencing channel reads, in spaCR's order (``spacr.ops_engine._BASES``)."""

CHANNELS = ("CY3", "A594", "CY5", "CY7")
"""The base channels, in the order the bases are read (spaCR's default ``ops_base_channels``)."""

WELL = "A1"
"""The one well the plate holds."""

_PITCH = 24
"""One nucleus per ``_PITCH`` x ``_PITCH`` 10X pixels, jittered: about the density of a confluent
well, and far enough apart (at least 12 px) that no two thresholded nuclei touch."""

_JITTER = 6
"""How far a nucleus may move off its grid point, either way, on each axis."""

_NUCLEUS_SIGMA = 2.5
"""A nucleus's Gaussian width at 10X, in pixels."""

_MARGIN = 16
"""Canvas beyond the tiles: more than the largest cycle shift plus channel shift."""

_CYCLE_SHIFT = 6
"""The largest whole-cycle shift, in pixels, either way."""

_CHANNEL_SHIFT = 3
"""The largest shift of one channel within its cycle, in pixels, either way."""

_BACKGROUND = 300.0
"""The nuclear channel's floor; :data:`THRESHOLD` sits well above it and its noise."""

THRESHOLD = 900.0
"""Where :class:`ThresholdModel` cuts the nuclear composite."""

_READS = 3
"""Reads planted around each nucleus."""

_ROTATION_DEGREES = 0.4
"""The phenotype acquisition's rotation against the sequencing one."""


@dataclass(frozen=True)
class PlateSpec:
    """What :func:`write_plate` wrote, and how to hand it to spaCR's ``run_ops``.

    :param folder: the plate's folder.
    :param genotype_source: the sequencing acquisition (``settings["genotype_source"]``).
    :param phenotype_source: the phenotype acquisition (``settings["phenotype_source"]``).
    :param wells: the wells to run.
    :param library: the guide barcodes, every planted barcode among them.
    :param sites: sequencing tiles in the well.
    :param size: a sequencing tile's side, in pixels.
    :param overlap: how far neighbouring sequencing tiles overlap, in pixels.
    :param cycles: sequencing cycles.
    :param phenotype_fields: phenotype tiles in the well.
    :param phenotype_size: a phenotype tile's side, in pixels.
    :param nuclei: nuclei planted under the sequencing tiles.
    :param reads: reads planted under the sequencing tiles.
    :param seed: the random seed everything was drawn from.
    """

    folder: Path
    genotype_source: Path
    phenotype_source: Path
    wells: tuple[str, ...]
    library: tuple[str, ...]
    sites: int
    size: int
    overlap: int
    cycles: int
    phenotype_fields: int
    phenotype_size: int
    nuclei: int
    reads: int
    seed: int

    def settings(self, dst_root: Path | str, *, workers: int = 1) -> dict[str, Any]:
        """The settings ``run_ops`` takes for this plate, its database written under ``dst_root``.

        :param dst_root: where ``measurements.db`` and the well's report go.
        :param workers: how many fields decode at once (``n_workers``).
        :returns: a fresh dictionary: the CPU only, the plate's own overlap, reads stored.
        """
        if int(workers) < 1:
            raise ValueError(f"workers must be at least 1; got {workers!r}")
        return {
            "genotype_source": str(self.genotype_source),
            "phenotype_source": str(self.phenotype_source),
            "dst_root": str(dst_root),
            "plate": "synthetic",
            "ops_gpu": False,
            "n_workers": int(workers),
            "ops_raster_overlap": self.overlap,
            "ops_store_reads": True,
        }


class ThresholdModel:
    """Cellpose's place in the objects phase, for a process without Cellpose's weights.

    spaCR's contract with its segmenter is "a label image per window"; this one labels the
    connected regions of the composite above :data:`THRESHOLD`, which on this plate are the
    planted nuclei, one label each.
    """

    def __init__(self, threshold: float = THRESHOLD) -> None:
        """:param threshold: the intensity a nucleus's pixels exceed."""
        self.threshold = float(threshold)

    def eval(self, image: Any, **_options: Any) -> tuple[np.ndarray]:
        """Label one composed window, as ``CellposeModel.eval`` returns masks first.

        :param image: the window.
        :param _options: Cellpose's options (``batch_size``, ``diameter``), which a threshold has
            no use for.
        :returns: ``(labels,)``.
        """
        from scipy import ndimage

        labels, _count = ndimage.label(np.asarray(image) > self.threshold)
        return (labels,)


def install_threshold_model(ops_engine: Any, threshold: float = THRESHOLD) -> None:
    """Give ``ops_engine``'s objects phase :class:`ThresholdModel` where it would load Cellpose.

    A monkeypatch of ``_cellpose_model`` in this process: the objects phase runs in the process
    that calls ``run_ops``, so that is the one that needs it.

    :param ops_engine: the ``spacr.ops_engine`` module.
    :param threshold: passed to the model.
    """
    ops_engine._cellpose_model = lambda settings, gpu: ThresholdModel(threshold)


def phenotype_field_count(sites: int) -> int:
    """The round well of half the sequencing pitch over ``sites`` tiles (9 -> 45, 5 -> 21).

    spaCR seeds each phenotype field from the ratio of the two layouts' radii, so the count is the
    round well whose radius is closest to twice the sequencing well's.

    :param sites: sequencing tiles.
    :returns: the phenotype field count.
    """
    from spacr.ops_layout import round_well_layout

    wanted = 2.0 * float(round_well_layout(sites).radius)
    best: tuple[float, int] | None = None
    for count in range(sites, 8 * sites + 8):
        try:
            radius = float(round_well_layout(count).radius)
        except ValueError:
            continue
        if best is None or abs(radius - wanted) < best[0]:
            best = (abs(radius - wanted), count)
    if best is None:
        raise ValueError(f"no round phenotype well fits {sites} sequencing sites")
    return best[1]


def default_overlap(size: int) -> int:
    """The sequencing tiles' overlap for a tile of ``size`` px.

    The measured plate's 213 px on 1,480 (14 %); a smaller tile keeps up to 30 % of itself (at
    most 213 px), because spaCR's stitch correlates a strip of 30 % of the tile, and at 14 % of a
    small tile half of each strip holds nothing its neighbour shares.

    :param size: a tile's side.
    :returns: the overlap in pixels.
    """
    return max(round(size * 213 / 1480), min(213, round(0.3 * size)))


def _splat(shape: tuple[int, int], ys: np.ndarray, xs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Point masses at sub-pixel positions, each shared bilinearly by its four pixels.

    :param shape: the image's shape.
    :param ys: rows.
    :param xs: columns.
    :param weights: each point's mass.
    :returns: a float32 image; points outside it are dropped.
    """
    height, width = shape
    top, left = np.floor(ys).astype(np.int64), np.floor(xs).astype(np.int64)
    fy, fx = ys - top, xs - left
    total = np.zeros(height * width, np.float64)
    for dy, dx, share in ((0, 0, (1 - fy) * (1 - fx)), (0, 1, (1 - fy) * fx), (1, 0, fy * (1 - fx)), (1, 1, fy * fx)):
        row, column = top + dy, left + dx
        inside = (row >= 0) & (row < height) & (column >= 0) & (column < width)
        total += np.bincount(row[inside] * width + column[inside], (weights * share)[inside], minlength=height * width)
    return total.reshape(height, width).astype(np.float32)


def _blobs(shape: tuple[int, int], ys: np.ndarray, xs: np.ndarray, peaks: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blobs of width ``sigma`` whose heights are ``peaks``."""
    from scipy import ndimage

    mass = peaks * (2.0 * math.pi * sigma * sigma)
    return ndimage.gaussian_filter(_splat(shape, ys, xs, mass), sigma, truncate=3.5)


def _barcodes(rng: np.random.Generator, cycles: int) -> tuple[str, ...]:
    """A guide library: distinct barcodes of ``cycles`` bases, none a single repeated base.

    A barcode whose base never changes has no variance over the cycles, which the read detector
    treats as debris; no real library carries one.
    """
    wanted = min(1000, max(8, 4**cycles // 8))
    found: dict[str, None] = {}
    while len(found) < wanted:
        code = "".join(BASES[i] for i in rng.integers(0, 4, cycles))
        if len(set(code)) > 1:
            found.setdefault(code)
    return tuple(found)


def _check(sites: int, size: int, cycles: int, seed: int) -> None:
    """Refuse arguments no plate can be written from, naming the argument."""
    from spacr.ops_layout import round_well_layout

    for name, value in (("sites", sites), ("size", size), ("cycles", cycles), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer; got {type(value).__name__}")
    if size < 128:
        raise ValueError(f"size must be at least 128 px; got {size}")
    if cycles < 3:
        raise ValueError(f"cycles must be at least 3 (spaCR decodes no field with fewer); got {cycles}")
    try:
        round_well_layout(int(sites))
    except ValueError as failure:
        raise ValueError(
            f"sites must be a round well's field count (5, 9, 13, 21, ...); got {sites}: {failure}"
        ) from failure


def write_plate(folder: Path | str, *, sites: int = 9, size: int = 512, cycles: int = 4, seed: int = 0) -> PlateSpec:
    """Write one synthetic well under ``folder``: ``genotype/`` (10X) and ``phenotype/`` (20X).

    :param folder: where to write; created if missing.
    :param sites: sequencing tiles, a round well's count (5, 9, 13, 21, ...).
    :param size: a sequencing tile's side in pixels (the measured plate's is 1,480); a phenotype
        tile has twice as many.
    :param cycles: sequencing cycles, each four bases (the first also carries DAPI).
    :param seed: everything is drawn from it.
    :returns: the :class:`PlateSpec` to run spaCR's ``run_ops`` with.
    :raises TypeError: when an argument is not an integer.
    :raises ValueError: when ``sites`` is no round well's count, ``size`` is under 128 px or
        ``cycles`` under 3.
    """
    import tifffile
    from spacr.ops_layout import round_well_layout

    _check(sites, size, cycles, seed)
    sites, size, cycles, seed = int(sites), int(size), int(cycles), int(seed)
    root = Path(folder)
    rng = np.random.default_rng(seed)
    overlap = default_overlap(size)
    step = size - overlap

    # The sequencing raster, in the canvas's pixels.
    layout = round_well_layout(sites)
    rows = [row for _column, row in layout.positions()]
    top_row = min(rows)
    height = step * (max(rows) - top_row) + size + 2 * _MARGIN
    width = step * (layout.columns - 1) + size + 2 * _MARGIN
    tops = {
        site: ((row - top_row) * step + _MARGIN, column * step + _MARGIN)
        for site, (column, row) in enumerate(layout.positions())
    }

    # The phenotype raster: half the pitch, centred on the middle tile, rotated as a whole.
    fields = phenotype_field_count(sites)
    phenotype = round_well_layout(fields)
    middle_top, middle_left = tops[layout.site(*layout.centre)]
    middle = np.array([middle_top + size / 2.0, middle_left + size / 2.0])
    angle = math.radians(_ROTATION_DEGREES)
    rotation = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    pitch = step / 2.0
    centres = {
        site: middle + rotation @ (np.array([row - phenotype.centre[1], column - phenotype.centre[0]]) * pitch)
        for site, (column, row) in enumerate(phenotype.positions())
    }
    phenotype_size = 2 * size
    scale = 0.25  # phenotype pixels to 10X pixels: half the field over twice the pixels
    reach = phenotype_size * scale / math.sqrt(2.0) + 2 * _PITCH

    # Nuclei on a jittered grid over both acquisitions, each with a brightness and a barcode.
    low = np.minimum([0.0, 0.0], np.min(list(centres.values()), axis=0) - reach)
    high = np.maximum([height, width], np.max(list(centres.values()), axis=0) + reach)
    grid_y, grid_x = np.meshgrid(np.arange(low[0], high[0], _PITCH), np.arange(low[1], high[1], _PITCH), indexing="ij")
    ny = grid_y.ravel() + _PITCH / 2 + rng.uniform(-_JITTER, _JITTER, grid_y.size)
    nx = grid_x.ravel() + _PITCH / 2 + rng.uniform(-_JITTER, _JITTER, grid_x.size)
    kept = rng.random(ny.size) < 0.9
    ny, nx = ny[kept], nx[kept]
    brightness = rng.uniform(3950.0, 4050.0, ny.size)
    library = _barcodes(rng, cycles)
    codes = rng.integers(0, len(library), ny.size)

    # Reads: three on each nucleus's rim, every one carrying its nucleus's barcode.
    owner = np.repeat(np.arange(ny.size), _READS)
    turn = rng.uniform(0.0, 2.0 * math.pi, owner.size)
    distance = rng.uniform(4.0, 7.0, owner.size)
    ry, rx = ny[owner] + distance * np.sin(turn), nx[owner] + distance * np.cos(turn)
    spot = rng.uniform(3000.0, 6000.0, owner.size)
    read_bases = np.array([[BASES.index(base) for base in library[code]] for code in codes[owner]], np.int64).reshape(
        owner.size, cycles
    )

    # Shifts: each later cycle as a whole, and about a quarter of its channels again.
    cycle_shift = {1: (0, 0)}
    channel_shift: dict[tuple[int, int], tuple[int, int]] = {}
    for cycle in range(2, cycles + 1):
        cycle_shift[cycle] = tuple(int(v) for v in rng.integers(-_CYCLE_SHIFT, _CYCLE_SHIFT + 1, 2))
        for channel in range(len(CHANNELS)):
            if rng.random() < 0.25:
                channel_shift[(cycle, channel)] = tuple(
                    int(v) for v in rng.integers(-_CHANNEL_SHIFT, _CHANNEL_SHIFT + 1, 2)
                )

    from scipy import ndimage

    texture = ndimage.gaussian_filter(rng.random((height, width), np.float32), 3.0)
    texture = (texture - texture.min()) / max(float(np.ptp(texture)), 1e-6) * 400.0 + 150.0
    dapi = _blobs((height, width), ny, nx, brightness, _NUCLEUS_SIGMA) + _BACKGROUND
    noise_seeds = np.random.SeedSequence(seed).spawn(2)
    tile_noise = np.random.default_rng(noise_seeds[0])

    def tile(canvas: np.ndarray, top: int, left: int, shift: tuple[int, int], sigma: float) -> np.ndarray:
        dy, dx = shift
        cut = canvas[top - dy : top - dy + size, left - dx : left - dx + size]
        noisy = cut + tile_noise.standard_normal(cut.shape, np.float32) * sigma
        return np.clip(np.rint(noisy), 0, 65535).astype(np.uint16)

    genotype = root / "genotype"
    for cycle in range(1, cycles + 1):
        (genotype / f"c{cycle}").mkdir(parents=True, exist_ok=True)
    # A cycle's four planes are drawn together, its tiles written as they are cut.
    for cycle in range(1, cycles + 1):
        planes = []
        for channel in range(len(CHANNELS)):
            chosen = read_bases[:, cycle - 1] == channel
            planes.append(texture + _blobs((height, width), ry[chosen], rx[chosen], spot[chosen], 1.0))
        for site, (top, left) in tops.items():
            if cycle == 1:
                stack = [tile(dapi, top, left, (0, 0), 15.0)]
                stack += [tile(plane, top, left, (0, 0), 10.0) for plane in planes]
                tifffile.imwrite(
                    genotype / "c1" / f"10X_c1_{WELL}_DAPI-{'-'.join(CHANNELS)}_Site-{site}.tif", np.stack(stack)
                )
                continue
            for channel, name in enumerate(CHANNELS):
                shift = cycle_shift[cycle]
                extra = channel_shift.get((cycle, channel), (0, 0))
                moved = (shift[0] + extra[0], shift[1] + extra[1])
                tifffile.imwrite(
                    genotype / f"c{cycle}" / f"10X_c{cycle}_{WELL}_{name}_Site-{site}.tif",
                    tile(planes[channel], top, left, moved, 10.0),
                )
        del planes

    # Phenotype fields, drawn at their own resolution from the same nuclei.
    phenotype_folder = root / "phenotype"
    phenotype_folder.mkdir(parents=True, exist_ok=True)
    field_noise = np.random.default_rng(noise_seeds[1])
    half = (phenotype_size - 1) / 2.0
    for site, centre in centres.items():
        near = (np.abs(ny - centre[0]) < reach) & (np.abs(nx - centre[1]) < reach)
        offset = np.stack([ny[near] - centre[0], nx[near] - centre[1]])
        local = rotation.T @ offset / scale + half
        plane = _blobs((phenotype_size, phenotype_size), local[0], local[1], brightness[near], _NUCLEUS_SIGMA / scale)
        plane += _BACKGROUND + field_noise.standard_normal(plane.shape, np.float32) * 12.0
        tifffile.imwrite(
            phenotype_folder / f"20X_DAPI_{WELL}_DAPI_Site-{site}.tif",
            np.clip(np.rint(plane), 0, 65535).astype(np.uint16),
        )

    under = np.zeros(ny.size, bool)
    for top, left in tops.values():
        under |= (ny >= top) & (ny < top + size) & (nx >= left) & (nx < left + size)
    return PlateSpec(
        folder=root,
        genotype_source=genotype,
        phenotype_source=phenotype_folder,
        wells=(WELL,),
        library=library,
        sites=sites,
        size=size,
        overlap=overlap,
        cycles=cycles,
        phenotype_fields=fields,
        phenotype_size=phenotype_size,
        nuclei=int(under.sum()),
        reads=int(_READS * under.sum()),
        seed=seed,
    )
