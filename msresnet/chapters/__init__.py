"""The book's own machinery: the chapters' parameters and records, their papermill
reproduction, the results page and JupyterLab.

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
