"""`distdeck calibrate`: measure the machine it runs on (a CUDA GPU if there is one, else the CPU) and write a
hardware profile that the estimator runs on instead of the catalog's datasheet figures.

    from simulations.calibrate import calibrate, plan
    profile_json = calibrate(plan("auto"))

measure.py holds the measurements (each part's docstring and note say what it times and how), timing.py the
clocks, llama.py the small Llama whose shapes a CPU is measured at and which the benchmark trains. Reading and
checking a profile, and turning it into a GPU-like entry, is torch-free: simulations.estimate.profile.
"""

from simulations.calibrate.measure import Plan, calibrate, plan, steps

__all__ = ["Plan", "calibrate", "plan", "steps"]
