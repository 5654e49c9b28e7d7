"""CIFAR-10 from the archive to batches: its facts and format, download, preparation, the
held-out split, which images were scored, a run's data resolved once, pictures, the
``mindspore.dataset`` pipeline and MindRecord.

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
