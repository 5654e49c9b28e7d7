"""CIFAR-10 from the archive to batches: the format and its facts, download, preparation,
the held-out split, pictures, the ``mindspore.dataset`` pipeline and MindRecord.

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
