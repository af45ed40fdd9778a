"""The results dataset: the pinned Arrow schema, row assembly and the Parquet writer."""
