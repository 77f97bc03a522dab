"""Hashed shard keys: the hash itself (:mod:`.hashkey`), sharding the collections of a cluster
(:mod:`.collections`) and planning the chunks before a cluster exists (:mod:`.plan`)."""
