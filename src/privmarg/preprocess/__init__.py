"""Preprocessing raw tables for the marginal mechanisms (issue #6, SPEC §9).

:class:`TableEncoder` validates a raw mixed-type table against a public schema, discretises it
(uniform bins: free; PrivTree and quantile bins, rare-category merging, DP bounds and values: DP,
charged to the caller's accountant)
and decodes synthetic codes back to the schema's types.
"""

from .binning import bin_index, privtree_edges, privtree_parameters, uniform_edges
from .encoder import ColumnCodec, TableEncoder
from .merging import RARE_THRESHOLD, rare_categories

__all__ = [
    "ColumnCodec", "RARE_THRESHOLD", "TableEncoder", "bin_index", "privtree_edges", "privtree_parameters",
    "rare_categories", "uniform_edges",
]
