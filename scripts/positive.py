"""An argparse type for counts the benchmark scripts take (rounds, runs, processes,
threads): a whole number above 0, so that 0 or a typo is one line from argparse, not
a traceback from the statistics of no rounds after the builds."""

import argparse


def positive(text: str) -> int:
    """`text` as a whole number above 0, else argparse's error naming it."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return n
