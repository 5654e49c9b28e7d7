"""The network and what defines its training step: ResNet50, losses, the learning-rate
schedules, Nesterov momentum, FLOPs and flip test-time augmentation.

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
