"""Approved kernels from kernelpilot, swapped into the model by install(model).

Written by `kernelpilot apply --write`; each entry is a drop-in operator written when its kernel was
approved (torch only: kernelpilot need not be installed).
"""

import importlib.util
import sys
from pathlib import Path

DROPINS = ['problems/1_chain_add_to_copy_pow_mean_add_rsqrt_mul_to_copy_mul/candidate/dropin.py', 'problems/5_llamarmsnorm/candidate/dropin.py', 'problems/8_chain_silu_mul/candidate/dropin.py']  # relative to this file


def install(model):
    """Swap every approved kernel into ``model``; returns the module paths swapped."""
    swapped = []
    for rel in DROPINS:
        path = (Path(__file__).resolve().parent / rel).resolve()
        name = "kernelpilot_dropin_" + path.parent.parent.name.replace("-", "_")
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        swapped += module.install(model)
    return swapped
