"""Training and choosing: the factories that build a run from a config, the training loop
and its callbacks, checkpoints, the choice of the best one, the final test, the sweep,
the weight average, the rank of a data-parallel worker.

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
