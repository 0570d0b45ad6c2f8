"""Burn-in stage: reading tool output.

nccl-tests (parse), perftest, the per-GPU tools (gpuparse) and the fabric's
own maps (fabricmap) into numbers. Imports only the records below it.
"""
