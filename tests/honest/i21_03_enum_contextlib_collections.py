"""Honest (issue 21, root cause 3): enum, contextlib, collections, itertools, operator, warnings and typing, as a
solution uses them to organise its code: a mode enum, a null context around the work, an ordered registry of
formulations and a warning for a shape it handles slowly."""
import contextlib
import enum
import itertools
import operator
import warnings
from collections import OrderedDict
from typing import Callable

import torch


class Mode(enum.Enum):
    STABLE = "stable"
    ONLINE = "online"


def _stable(z: torch.Tensor) -> torch.Tensor:
    e = torch.exp(z - z.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def _online(z: torch.Tensor) -> torch.Tensor:
    return torch.softmax(z, dim=-1)


FORMULATIONS: "OrderedDict[Mode, Callable]" = OrderedDict([(Mode.STABLE, _stable), (Mode.ONLINE, _online)])
_ROW_LIMIT = operator.mul(*next(itertools.islice(itertools.repeat((256, 256)), 1)))


def run(x, scale):
    if x.shape[-1] > _ROW_LIMIT:
        warnings.warn("a very long row: the stable formulation is used", stacklevel=2)
    with contextlib.nullcontext():
        return FORMULATIONS[Mode.STABLE](x * scale)
