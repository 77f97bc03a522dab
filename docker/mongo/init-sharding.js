// Phase 2 of the cluster setup, through mongos: add the shards, enable sharding
// on the sci-ingest database and shard its data collections on hashed keys.
// Runs in the mongo-init-sharding container:
//   mongosh --nodb --quiet /scripts/init-sharding.js
// Environment (set in docker-compose.yml):
//   MONGOS_URI            "mongodb://mongos:27017/"
//   MONGO_SHARD_REPLSETS  "shard1rs/shard1a:27018,... shard2rs/..."  (as for phase 1)
//   SCI_INGEST_DB         "sci_ingest"
//   SHARD_KEYS            "searches:_id hits:search_id materials:_id tasks:_id"
//                         (must match ingest.mongo.SHARD_KEYS; tests/test_docker_compose.py checks)
load("/scripts/common.js");

const TIMEOUT = Number(env("MONGO_INIT_TIMEOUT", "300"));
const mongos = connectWithRetry(env("MONGOS_URI"), TIMEOUT);
const admin = mongos.getDB("admin");
const dbName = env("SCI_INGEST_DB", "sci_ingest");

// 1. Shards.
const listed = command(admin, { listShards: 1 });
if (listed.ok !== 1) throw new Error(`listShards failed: ${tojson(listed)}`);
const present = new Set(listed.shards.map((s) => s._id));
env("MONGO_SHARD_REPLSETS").split(/\s+/).filter((s) => s).forEach((spec) => {
  const rs = parseReplSet(spec);
  if (present.has(rs.id)) {
    print(`shard ${rs.id}: already added`);
    return;
  }
  const reply = command(admin, { addShard: spec, name: rs.id });
  if (reply.ok !== 1) throw new Error(`addShard ${spec} failed: ${tojson(reply)}`);
  print(`shard ${rs.id}: added`);
});

// 2. The database (implicit since MongoDB 6.0; explicit for older servers, a no-op otherwise).
const enabled = command(admin, { enableSharding: dbName });
if (enabled.ok !== 1) throw new Error(`enableSharding ${dbName} failed: ${tojson(enabled)}`);

// 3. Hashed shard keys.  The hashed index is created first so sharding also
// works on a collection that already holds data.
const db = mongos.getDB(dbName);
env("SHARD_KEYS").split(/\s+/).filter((s) => s).forEach((pair) => {
  const [coll, field] = pair.split(":");
  const ns = `${dbName}.${coll}`;
  const key = { [field]: "hashed" };
  const meta = mongos.getDB("config").getCollection("collections").findOne({ _id: ns });
  if (meta && !meta.unsplittable) {
    if (JSON.stringify(meta.key) !== JSON.stringify(key)) {
      throw new Error(`${ns} is already sharded on ${tojson(meta.key)}, not ${tojson(key)}`);
    }
    print(`${ns}: already sharded on ${tojson(key)}`);
    return;
  }
  const indexed = command(db, { createIndexes: coll, indexes: [{ key: key, name: `${field}_hashed` }] });
  if (indexed.ok !== 1 && indexed.code !== 85 /* IndexOptionsConflict */ && indexed.code !== 86) {
    throw new Error(`creating the hashed index on ${ns} failed: ${tojson(indexed)}`);
  }
  const reply = command(admin, { shardCollection: ns, key: key });
  if (reply.ok !== 1) throw new Error(`shardCollection ${ns} failed: ${tojson(reply)}`);
  print(`${ns}: sharded on ${tojson(key)}`);
});

const shards = command(admin, { listShards: 1 }).shards.map((s) => s._id);
print(`cluster ready: shards ${shards.join(", ")}; ${dbName} sharded`);
