"""Scores change-point regression detectors on one labelled corpus of benchmark histories.

``python -m tools.detector_eval.score --out DIR`` writes the table, the plot and
the full numbers (docs/detectors.md describes the corpus and the settings).
"""
