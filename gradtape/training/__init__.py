"""Training, in TensorFlow's and Keras's names: layers, optimizers, losses, ``gt.Module`` and checkpoints
(``gt.train.Checkpoint``), all written on the public ops and the tape."""
