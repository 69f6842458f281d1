"""`python -m bench`: run every benchmark (bench/figures.py, bench/estimate.py, bench/calibrated.py,
bench/lighthouse.py) and print the medians."""

from bench import calibrated, estimate, lighthouse
from bench.figures import main

if __name__ == "__main__":
    main()
    estimate.main()
    calibrated.main()
    lighthouse.main([])
