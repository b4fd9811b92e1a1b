"""Robotics study: Bridge V2 multi-view extraction, a multi-view tabletop simulator, MVP-LAM.

Stages: `stages.py`. Other studies use only `paperflow.robotics.api` (simulator, dataset writer/reader,
frozen stem, ridge probe). See README.md in this folder for the data schema and the closed-loop API.
"""
