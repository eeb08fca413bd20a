"""Training: where a config becomes a trained run directory.

trainer      the training loop (`nmt train`): validation, checkpoints, resume, signals
batches      what a run trains on: encoded pairs, token batches, each rank's share, guides
loss         the label-smoothed cross-entropy in one pass
optim        Adam over the model's parameter groups; schedule: the learning-rate schedules
guided       guided alignment's training parts: teacher links, piece targets, the loss
adapt        `nmt align --adapt`: a short fine-tune of a copy of a model on given pairs
distributed  devices, precision, torchrun/DDP; tensorboard: events beside metrics.jsonl

May import nmt.core, nmt.data, nmt.models, nmt.align and nmt.decoding (validation decodes).
"""
