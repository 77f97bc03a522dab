"""The embedded SecantusDB server: its process (:mod:`.embedded`), the keeper that shares one per
home (:mod:`.keeper`), access control (:mod:`.access`) and the secrets it keeps (:mod:`.secrets`)."""
