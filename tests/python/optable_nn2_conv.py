"""Conformance table, tier-2 NN ops (conv family). Names, inputs and attributes follow PyTorch."""

TABLE = {}
