"""`python -m bench`: run every benchmark in bench/figures.py and print the medians."""

from bench.figures import main

if __name__ == "__main__":
    main()
