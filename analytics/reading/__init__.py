"""Reading MongoDB for the analyses and the validation, in parallel: the plan (:mod:`.planning`:
key ranges or one stream, asked of the server by ``explain``), key-range partitions
(:mod:`.partitions`), a sharded collection's chunks (:mod:`.chunks`) and one sorted stream cut
into chunks (:mod:`.streaming`)."""
