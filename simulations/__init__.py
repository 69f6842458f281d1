"""distdeck's simulator: real torch.distributed runs, traced and turned into frames.

Public API for the web layer:
    simulations.frames      the versioned wire schema (Meta, Frame, Summary, RunFile)
    simulations.scenarios   the catalog: get(name), all_scenarios()
    simulations.runtime     the warm pool of rank processes, and Run (one job's events)
"""
