"""Measurements behind the book's choices: step and pipeline benchmarks, chapter 10's
ablation and the learning-rate range test.

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
