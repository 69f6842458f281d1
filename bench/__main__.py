"""`python -m bench`: run every benchmark (bench/figures.py, bench/estimate.py) and print the medians."""

from bench import estimate
from bench.figures import main

if __name__ == "__main__":
    main()
    estimate.main()
