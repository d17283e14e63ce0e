"""Records of nn.functional's spatial transformers: grid_sample and affine_grid.

Grid points are drawn past [-1, 1] so every padding mode reads outside the input; the first
sample of each record is small enough for gradgradcheck."""

import itertools

from ..opinfo import FLOATS, OpInfo, Sample, make_array

_GRID_4D = [
    ((1, 2, 3, 3), (1, 2, 2, 2)),
    ((2, 3, 4, 5), (2, 3, 6, 2)),
    ((0, 2, 3, 3), (0, 2, 2, 2)),
]
_GRID_5D = [((1, 1, 2, 3, 2), (1, 2, 1, 2, 3)), ((2, 2, 3, 4, 5), (2, 2, 3, 4, 3))]


def _grid_samples(cases, mode):
    def build(rng, dtype):
        out = []
        for (xs, gs), padding, corners in itertools.product(
            cases, ("zeros", "border", "reflection"), (False, True)
        ):
            x, grid = make_array(rng, xs, dtype), make_array(rng, gs, dtype, -1.6, 1.6)
            kwargs = {"mode": mode, "padding_mode": padding, "align_corners": corners}
            out.append(Sample((x, grid), kwargs))
        return out

    return build


def _affine_samples(rng, dtype):
    sizes = [(1, 1, 2, 3), (2, 3, 4, 5), (2, 1, 1, 3), (1, 2, 2, 3, 4), (2, 1, 3, 1, 2)]
    return [
        Sample((make_array(rng, (s[0], len(s) - 2, len(s) - 1), dtype), s), {"align_corners": c})
        for s, c in itertools.product(sizes, (False, True))
    ]


def _torch_affine_grid(torch, theta, size, **kwargs):
    import warnings

    with warnings.catch_warnings():  # unit-size grids with align_corners=True: a behaviour note
        warnings.simplefilter("ignore", UserWarning)
        return torch.nn.functional.affine_grid(theta, size, **kwargs)


def _record(cases, mode, variant):
    return OpInfo(
        "nn.functional.grid_sample", _grid_samples(cases, mode), variant=variant, dtypes=FLOATS
    )


RECORDS = [
    _record(_GRID_4D, "bilinear", "bilinear"),
    _record(_GRID_4D, "nearest", "nearest"),
    _record(_GRID_5D, "bilinear", "trilinear"),
    _record(_GRID_5D, "nearest", "nearest_5d"),
    OpInfo("nn.functional.affine_grid", _affine_samples, torch=_torch_affine_grid, dtypes=FLOATS),
]
