"""Conformance table, tier-2 NN ops (norm family). Names, inputs and attributes follow PyTorch."""

TABLE = {}
