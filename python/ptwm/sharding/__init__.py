"""Sharded ``.ptwm`` writers/readers."""

from ._index import PtwmIndex, record_files
from ._reader import read_sharded_ptwm
from ._sharder import parse_size, plan_shards, shard_filename
from ._writer import compress_ptwm_blob, write_ptwm_shard

__all__ = ["compress_ptwm_blob", "write_ptwm_shard", "plan_shards", "shard_filename",
           "PtwmIndex", "record_files", "read_sharded_ptwm", "parse_size"]
