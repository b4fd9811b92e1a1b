"""paperflow: Snakemake pipelines that reproduce the methods of ICML 2026 papers."""

__version__ = "0.1.0"
