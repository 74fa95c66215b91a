"""Checkpoint-recompute planning: extract a Problem from a function, solve it, rewrite the function."""
