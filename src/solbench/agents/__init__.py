"""Agents that write kernels: model providers, prompts, the built-in loop, external agent scaffolds, metrics.

Everything here grades through the evaluator's public API (``solbench.evaluate.runner.evaluate``) and never
reaches into its internals; the trusted side decides every verdict, as for any other solution.
"""
