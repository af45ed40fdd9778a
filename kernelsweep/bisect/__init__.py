"""Bisection to the culprit: which SDK build or kernel commit made a point slower (docs/bisect.md)."""
