"""argparse types of the command line: durations, positive numbers, --extract's row."""

from __future__ import annotations

import argparse
import re


def duration(text: str) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; use seconds or a number with s, m or h, e.g. "
                                         "90s, 30m, 2h")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def row(text: str) -> int | str:
    """--extract: a positive row number, or (hotspots --group module|fusion) text naming the row."""
    return positive_int(text) if text.strip().lstrip("-").isdigit() else text


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value
