"""After training: export to MINDIR and ONNX (INT8 too) and the top-5 classes of pictures.

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
