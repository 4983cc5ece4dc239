/* Tables and action profiles for PI's dummy target that keep what is written.
 *
 * PI's dummy target accepts every write and forgets it, and its fetch functions fill nothing,
 * so a P4Runtime read through it returns whatever memory held. A controller that reconciles
 * by reading back (after a restart, on a backup's take-over) needs reads to answer with what
 * was written, as bf-drivers does on a Tofino switch. These functions replace the dummy's
 * table and action-profile functions (the program exports them, so libpi binds to them ahead
 * of libpi_dummy's); everything else (device, counters, clone sessions, packet I/O) stays the
 * dummy's. Nothing here models a data plane. Entries are kept in flat arrays searched
 * linearly: a test fabric holds hundreds of entries per switch.
 *
 * The fetch buffers follow the serialisation libpi's pi_table_entries_next and
 * pi_act_prof_mbrs_next/grps_next read (PI/int/serialize.h).
 */

#include <PI/int/pi_int.h>
#include <PI/int/serialize.h>
#include <PI/p4info/tables.h>
#include <PI/pi.h>
#include <PI/target/pi_act_prof_imp.h>
#include <PI/target/pi_imp.h>
#include <PI/target/pi_tables_imp.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  char *bytes;
  size_t size;
} blob_t;

typedef struct {
  pi_action_entry_type_t type;
  pi_p4_id_t action_id;
  blob_t data;
  pi_indirect_handle_t indirect;
} action_t;

typedef struct {
  pi_dev_id_t dev;
  pi_p4_id_t table;
  pi_entry_handle_t handle;
  pi_priority_t priority;
  blob_t key;
  action_t action;
} table_entry_t;

typedef struct {
  pi_dev_id_t dev;
  pi_p4_id_t table;
  action_t action;
} default_entry_t;

typedef struct {
  pi_dev_id_t dev;
  pi_p4_id_t act_prof;
  pi_indirect_handle_t handle;
  pi_p4_id_t action_id;
  blob_t data;
} member_t;

typedef struct {
  pi_dev_id_t dev;
  pi_p4_id_t act_prof;
  pi_indirect_handle_t handle;
  size_t count;
  pi_indirect_handle_t *members;
} group_t;

#define ARRAY(type, name) \
  static type *name;      \
  static size_t name##_len, name##_cap

ARRAY(table_entry_t, entries);
ARRAY(default_entry_t, defaults);
ARRAY(member_t, members);
ARRAY(group_t, groups);

/* Entry handles and indirect handles: members and groups share one space, as the frontend
 * tells a table entry's member from its group by looking the handle up in both. */
static uint64_t next_handle = 1;

static void *grow(void *array, size_t *cap, size_t len, size_t item) {
  if (len < *cap) return array;
  size_t wanted = *cap ? *cap * 2 : 64;
  void *bigger = realloc(array, wanted * item);
  if (bigger == NULL) return NULL;
  *cap = wanted;
  return bigger;
}

#define APPEND(name, value)                                                   \
  ({                                                                          \
    void *_grown = grow(name, &name##_cap, name##_len, sizeof(*name));        \
    int _ok = _grown != NULL;                                                 \
    if (_ok) {                                                                \
      name = _grown;                                                          \
      name[name##_len++] = (value);                                           \
    }                                                                         \
    _ok;                                                                      \
  })

#define REMOVE_AT(name, index) (name[index] = name[--name##_len])

static blob_t blob_copy(const char *bytes, size_t size) {
  blob_t blob = {NULL, size};
  if (size == 0) return blob;
  blob.bytes = malloc(size);
  if (blob.bytes != NULL) memcpy(blob.bytes, bytes, size);
  return blob;
}

static int action_from(const pi_table_entry_t *entry, action_t *out) {
  memset(out, 0, sizeof(*out));
  out->type = entry->entry_type;
  if (entry->entry_type == PI_ACTION_ENTRY_TYPE_DATA) {
    const pi_action_data_t *data = entry->entry.action_data;
    out->action_id = data->action_id;
    out->data = blob_copy(data->data, data->data_size);
    if (data->data_size && out->data.bytes == NULL) return 0;
  } else if (entry->entry_type == PI_ACTION_ENTRY_TYPE_INDIRECT) {
    out->indirect = entry->entry.indirect_handle;
  }
  return 1;
}

static int same_key(const table_entry_t *entry, pi_dev_id_t dev, pi_p4_id_t table,
                    const pi_match_key_t *key) {
  return entry->dev == dev && entry->table == table && entry->priority == key->priority &&
         entry->key.size == key->data_size &&
         memcmp(entry->key.bytes, key->data, key->data_size) == 0;
}

static long find_by_key(pi_dev_id_t dev, pi_p4_id_t table, const pi_match_key_t *key) {
  for (size_t i = 0; i < entries_len; i++)
    if (same_key(&entries[i], dev, table, key)) return (long)i;
  return -1;
}

static long find_by_handle(pi_dev_id_t dev, pi_p4_id_t table, pi_entry_handle_t handle) {
  for (size_t i = 0; i < entries_len; i++)
    if (entries[i].dev == dev && entries[i].table == table && entries[i].handle == handle)
      return (long)i;
  return -1;
}

/* A new pipeline starts with empty tables and profiles, as a switch's does. */
pi_status_t _pi_update_device_start(pi_dev_id_t dev_id, const pi_p4info_t *p4info,
                                    const char *device_data, size_t device_data_size) {
  (void)p4info;
  (void)device_data;
  (void)device_data_size;
  pthread_mutex_lock(&state_lock);
  for (size_t i = entries_len; i-- > 0;) {
    if (entries[i].dev != dev_id) continue;
    free(entries[i].key.bytes);
    free(entries[i].action.data.bytes);
    REMOVE_AT(entries, i);
  }
  for (size_t i = defaults_len; i-- > 0;) {
    if (defaults[i].dev != dev_id) continue;
    free(defaults[i].action.data.bytes);
    REMOVE_AT(defaults, i);
  }
  for (size_t i = members_len; i-- > 0;) {
    if (members[i].dev != dev_id) continue;
    free(members[i].data.bytes);
    REMOVE_AT(members, i);
  }
  for (size_t i = groups_len; i-- > 0;) {
    if (groups[i].dev != dev_id) continue;
    free(groups[i].members);
    REMOVE_AT(groups, i);
  }
  pthread_mutex_unlock(&state_lock);
  return PI_STATUS_SUCCESS;
}

/* -- tables --------------------------------------------------------------------------------- */

pi_status_t _pi_table_entry_add(pi_session_handle_t session_handle, pi_dev_tgt_t dev_tgt,
                                pi_p4_id_t table_id, const pi_match_key_t *match_key,
                                const pi_table_entry_t *table_entry, int overwrite,
                                pi_entry_handle_t *entry_handle) {
  (void)session_handle;
  pi_status_t status = PI_STATUS_SUCCESS;
  pthread_mutex_lock(&state_lock);
  long found = find_by_key(dev_tgt.dev_id, table_id, match_key);
  action_t action;
  if (found >= 0 && !overwrite) {
    status = PI_STATUS_INVALID_TABLE_OPERATION; /* the frontend refuses a duplicate first */
  } else if (!action_from(table_entry, &action)) {
    status = PI_STATUS_ALLOC_ERROR;
  } else if (found >= 0) {
    free(entries[found].action.data.bytes);
    entries[found].action = action;
    *entry_handle = entries[found].handle;
  } else {
    table_entry_t added = {dev_tgt.dev_id, table_id, next_handle++, match_key->priority,
                           blob_copy(match_key->data, match_key->data_size), action};
    if ((match_key->data_size && added.key.bytes == NULL) || !APPEND(entries, added)) {
      free(added.key.bytes);
      free(action.data.bytes);
      status = PI_STATUS_ALLOC_ERROR;
    } else {
      *entry_handle = added.handle;
    }
  }
  pthread_mutex_unlock(&state_lock);
  return status;
}

static pi_status_t delete_at(long index) {
  if (index < 0) return PI_STATUS_TARGET_ERROR;
  free(entries[index].key.bytes);
  free(entries[index].action.data.bytes);
  REMOVE_AT(entries, index);
  return PI_STATUS_SUCCESS;
}

pi_status_t _pi_table_entry_delete(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                   pi_p4_id_t table_id, pi_entry_handle_t entry_handle) {
  (void)session_handle;
  pthread_mutex_lock(&state_lock);
  pi_status_t status = delete_at(find_by_handle(dev_id, table_id, entry_handle));
  pthread_mutex_unlock(&state_lock);
  return status;
}

pi_status_t _pi_table_entry_delete_wkey(pi_session_handle_t session_handle,
                                        pi_dev_tgt_t dev_tgt, pi_p4_id_t table_id,
                                        const pi_match_key_t *match_key) {
  (void)session_handle;
  pthread_mutex_lock(&state_lock);
  pi_status_t status = delete_at(find_by_key(dev_tgt.dev_id, table_id, match_key));
  pthread_mutex_unlock(&state_lock);
  return status;
}

static pi_status_t modify_at(long index, const pi_table_entry_t *table_entry) {
  if (index < 0) return PI_STATUS_TARGET_ERROR;
  action_t action;
  if (!action_from(table_entry, &action)) return PI_STATUS_ALLOC_ERROR;
  free(entries[index].action.data.bytes);
  entries[index].action = action;
  return PI_STATUS_SUCCESS;
}

pi_status_t _pi_table_entry_modify(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                   pi_p4_id_t table_id, pi_entry_handle_t entry_handle,
                                   const pi_table_entry_t *table_entry) {
  (void)session_handle;
  pthread_mutex_lock(&state_lock);
  pi_status_t status = modify_at(find_by_handle(dev_id, table_id, entry_handle), table_entry);
  pthread_mutex_unlock(&state_lock);
  return status;
}

pi_status_t _pi_table_entry_modify_wkey(pi_session_handle_t session_handle,
                                        pi_dev_tgt_t dev_tgt, pi_p4_id_t table_id,
                                        const pi_match_key_t *match_key,
                                        const pi_table_entry_t *table_entry) {
  (void)session_handle;
  pthread_mutex_lock(&state_lock);
  pi_status_t status =
      modify_at(find_by_key(dev_tgt.dev_id, table_id, match_key), table_entry);
  pthread_mutex_unlock(&state_lock);
  return status;
}

static long find_default(pi_dev_id_t dev, pi_p4_id_t table) {
  for (size_t i = 0; i < defaults_len; i++)
    if (defaults[i].dev == dev && defaults[i].table == table) return (long)i;
  return -1;
}

pi_status_t _pi_table_default_action_set(pi_session_handle_t session_handle,
                                         pi_dev_tgt_t dev_tgt, pi_p4_id_t table_id,
                                         const pi_table_entry_t *table_entry) {
  (void)session_handle;
  pi_status_t status = PI_STATUS_SUCCESS;
  action_t action;
  pthread_mutex_lock(&state_lock);
  long found = find_default(dev_tgt.dev_id, table_id);
  if (!action_from(table_entry, &action)) {
    status = PI_STATUS_ALLOC_ERROR;
  } else if (found >= 0) {
    free(defaults[found].action.data.bytes);
    defaults[found].action = action;
  } else {
    default_entry_t added = {dev_tgt.dev_id, table_id, action};
    if (!APPEND(defaults, added)) {
      free(action.data.bytes);
      status = PI_STATUS_ALLOC_ERROR;
    }
  }
  pthread_mutex_unlock(&state_lock);
  return status;
}

pi_status_t _pi_table_default_action_reset(pi_session_handle_t session_handle,
                                           pi_dev_tgt_t dev_tgt, pi_p4_id_t table_id) {
  (void)session_handle;
  pthread_mutex_lock(&state_lock);
  long found = find_default(dev_tgt.dev_id, table_id);
  if (found >= 0) {
    free(defaults[found].action.data.bytes);
    REMOVE_AT(defaults, found);
  }
  pthread_mutex_unlock(&state_lock);
  return PI_STATUS_SUCCESS;
}

/* A table never given a default reads as one without an action (the program's own default is
 * not known here). */
pi_status_t _pi_table_default_action_get(pi_session_handle_t session_handle,
                                         pi_dev_tgt_t dev_tgt, pi_p4_id_t table_id,
                                         pi_table_entry_t *table_entry) {
  (void)session_handle;
  memset(table_entry, 0, sizeof(*table_entry));
  table_entry->entry_type = PI_ACTION_ENTRY_TYPE_NONE;
  pi_status_t status = PI_STATUS_SUCCESS;
  pthread_mutex_lock(&state_lock);
  long found = find_default(dev_tgt.dev_id, table_id);
  if (found >= 0) {
    const action_t *action = &defaults[found].action;
    table_entry->entry_type = action->type;
    if (action->type == PI_ACTION_ENTRY_TYPE_DATA) {
      pi_action_data_t *data = malloc(sizeof(*data) + action->data.size);
      if (data == NULL) {
        status = PI_STATUS_ALLOC_ERROR;
        table_entry->entry_type = PI_ACTION_ENTRY_TYPE_NONE;
      } else {
        data->p4info = pi_get_device_p4info(dev_tgt.dev_id);
        data->action_id = action->action_id;
        data->data_size = action->data.size;
        data->data = (char *)(data + 1);
        if (action->data.size) memcpy(data->data, action->data.bytes, action->data.size);
        table_entry->entry.action_data = data;
      }
    } else if (action->type == PI_ACTION_ENTRY_TYPE_INDIRECT) {
      table_entry->entry.indirect_handle = action->indirect;
    }
  }
  pthread_mutex_unlock(&state_lock);
  return status;
}

pi_status_t _pi_table_default_action_done(pi_session_handle_t session_handle,
                                          pi_table_entry_t *table_entry) {
  (void)session_handle;
  if (table_entry->entry_type == PI_ACTION_ENTRY_TYPE_DATA) free(table_entry->entry.action_data);
  return PI_STATUS_SUCCESS;
}

static size_t action_size(const action_t *action) {
  size_t size = sizeof(s_pi_action_entry_type_t);
  if (action->type == PI_ACTION_ENTRY_TYPE_DATA)
    size += sizeof(s_pi_p4_id_t) + sizeof(uint32_t) + action->data.size;
  else if (action->type == PI_ACTION_ENTRY_TYPE_INDIRECT)
    size += sizeof(s_pi_indirect_handle_t);
  return size;
}

static char *emit_action(char *out, const action_t *action) {
  out += emit_action_entry_type(out, action->type);
  if (action->type == PI_ACTION_ENTRY_TYPE_DATA) {
    out += emit_p4_id(out, action->action_id);
    out += emit_uint32(out, (uint32_t)action->data.size);
    if (action->data.size) memcpy(out, action->data.bytes, action->data.size);
    out += action->data.size;
  } else if (action->type == PI_ACTION_ENTRY_TYPE_INDIRECT) {
    out += emit_indirect_handle(out, action->indirect);
  }
  return out;
}

/* Every entry of one table, or the one with the given handle or key. */
static pi_status_t fetch_entries(pi_dev_tgt_t dev_tgt, pi_p4_id_t table_id,
                                 const pi_entry_handle_t *handle, const pi_match_key_t *key,
                                 pi_table_fetch_res_t *res) {
  pthread_mutex_lock(&state_lock);
  size_t count = 0, size = 0;
  for (size_t pass = 0; pass < 2; pass++) {
    char *out = pass ? res->entries : NULL;
    for (size_t i = 0; i < entries_len; i++) {
      const table_entry_t *entry = &entries[i];
      if (entry->dev != dev_tgt.dev_id || entry->table != table_id) continue;
      if (handle != NULL && entry->handle != *handle) continue;
      if (key != NULL && !same_key(entry, dev_tgt.dev_id, table_id, key)) continue;
      if (pass == 0) {
        count++;
        size += sizeof(s_pi_entry_handle_t) + sizeof(uint32_t) + entry->key.size +
                action_size(&entry->action) + 2 * sizeof(uint32_t);
        continue;
      }
      out += emit_entry_handle(out, entry->handle);
      out += emit_uint32(out, entry->priority);
      if (entry->key.size) memcpy(out, entry->key.bytes, entry->key.size);
      out += entry->key.size;
      out = emit_action(out, &entry->action);
      out += emit_uint32(out, 0); /* no entry properties */
      out += emit_uint32(out, 0); /* no direct resources */
    }
    if (pass == 0) {
      res->num_entries = count;
      res->entries_size = size;
      res->entries = malloc(size ? size : 1);
      if (res->entries == NULL) {
        pthread_mutex_unlock(&state_lock);
        return PI_STATUS_ALLOC_ERROR;
      }
    }
  }
  const pi_p4info_t *p4info = pi_get_device_p4info(dev_tgt.dev_id);
  res->mkey_nbytes = p4info ? pi_p4info_table_match_key_size(p4info, table_id) : 0;
  pthread_mutex_unlock(&state_lock);
  return PI_STATUS_SUCCESS;
}

pi_status_t _pi_table_entries_fetch(pi_session_handle_t session_handle, pi_dev_tgt_t dev_tgt,
                                    pi_p4_id_t table_id, pi_table_fetch_res_t *res) {
  (void)session_handle;
  return fetch_entries(dev_tgt, table_id, NULL, NULL, res);
}

pi_status_t _pi_table_entries_fetch_one(pi_session_handle_t session_handle,
                                        pi_dev_id_t dev_id, pi_p4_id_t table_id,
                                        pi_entry_handle_t entry_handle,
                                        pi_table_fetch_res_t *res) {
  (void)session_handle;
  pi_dev_tgt_t dev_tgt = {dev_id, 0xffff};
  return fetch_entries(dev_tgt, table_id, &entry_handle, NULL, res);
}

pi_status_t _pi_table_entries_fetch_wkey(pi_session_handle_t session_handle,
                                         pi_dev_tgt_t dev_tgt, pi_p4_id_t table_id,
                                         const pi_match_key_t *match_key,
                                         pi_table_fetch_res_t *res) {
  (void)session_handle;
  return fetch_entries(dev_tgt, table_id, NULL, match_key, res);
}

pi_status_t _pi_table_entries_fetch_done(pi_session_handle_t session_handle,
                                         pi_table_fetch_res_t *res) {
  (void)session_handle;
  free(res->entries);
  return PI_STATUS_SUCCESS;
}

/* -- action profiles ------------------------------------------------------------------------ */

static long find_member(pi_dev_id_t dev, pi_p4_id_t act_prof, pi_indirect_handle_t handle) {
  for (size_t i = 0; i < members_len; i++)
    if (members[i].dev == dev && members[i].act_prof == act_prof && members[i].handle == handle)
      return (long)i;
  return -1;
}

static long find_group(pi_dev_id_t dev, pi_p4_id_t act_prof, pi_indirect_handle_t handle) {
  for (size_t i = 0; i < groups_len; i++)
    if (groups[i].dev == dev && groups[i].act_prof == act_prof && groups[i].handle == handle)
      return (long)i;
  return -1;
}

pi_status_t _pi_act_prof_mbr_create(pi_session_handle_t session_handle, pi_dev_tgt_t dev_tgt,
                                    pi_p4_id_t act_prof_id, const pi_action_data_t *action_data,
                                    pi_indirect_handle_t *mbr_handle) {
  (void)session_handle;
  pi_status_t status = PI_STATUS_SUCCESS;
  pthread_mutex_lock(&state_lock);
  member_t added = {dev_tgt.dev_id, act_prof_id, next_handle++, action_data->action_id,
                    blob_copy(action_data->data, action_data->data_size)};
  if ((action_data->data_size && added.data.bytes == NULL) || !APPEND(members, added)) {
    free(added.data.bytes);
    status = PI_STATUS_ALLOC_ERROR;
  } else {
    *mbr_handle = added.handle;
  }
  pthread_mutex_unlock(&state_lock);
  return status;
}

pi_status_t _pi_act_prof_mbr_delete(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                    pi_p4_id_t act_prof_id, pi_indirect_handle_t mbr_handle) {
  (void)session_handle;
  pthread_mutex_lock(&state_lock);
  long found = find_member(dev_id, act_prof_id, mbr_handle);
  if (found >= 0) {
    free(members[found].data.bytes);
    REMOVE_AT(members, found);
  }
  pthread_mutex_unlock(&state_lock);
  return found >= 0 ? PI_STATUS_SUCCESS : PI_STATUS_TARGET_ERROR;
}

pi_status_t _pi_act_prof_mbr_modify(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                    pi_p4_id_t act_prof_id, pi_indirect_handle_t mbr_handle,
                                    const pi_action_data_t *action_data) {
  (void)session_handle;
  pi_status_t status = PI_STATUS_SUCCESS;
  pthread_mutex_lock(&state_lock);
  long found = find_member(dev_id, act_prof_id, mbr_handle);
  blob_t data = blob_copy(action_data->data, action_data->data_size);
  if (found < 0) {
    free(data.bytes);
    status = PI_STATUS_TARGET_ERROR;
  } else if (action_data->data_size && data.bytes == NULL) {
    status = PI_STATUS_ALLOC_ERROR;
  } else {
    free(members[found].data.bytes);
    members[found].action_id = action_data->action_id;
    members[found].data = data;
  }
  pthread_mutex_unlock(&state_lock);
  return status;
}

pi_status_t _pi_act_prof_grp_create(pi_session_handle_t session_handle, pi_dev_tgt_t dev_tgt,
                                    pi_p4_id_t act_prof_id, size_t max_size,
                                    pi_indirect_handle_t *grp_handle) {
  (void)session_handle;
  (void)max_size;
  pthread_mutex_lock(&state_lock);
  group_t added = {dev_tgt.dev_id, act_prof_id, next_handle++, 0, NULL};
  int ok = APPEND(groups, added);
  if (ok) *grp_handle = added.handle;
  pthread_mutex_unlock(&state_lock);
  return ok ? PI_STATUS_SUCCESS : PI_STATUS_ALLOC_ERROR;
}

pi_status_t _pi_act_prof_grp_delete(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                    pi_p4_id_t act_prof_id, pi_indirect_handle_t grp_handle) {
  (void)session_handle;
  pthread_mutex_lock(&state_lock);
  long found = find_group(dev_id, act_prof_id, grp_handle);
  if (found >= 0) {
    free(groups[found].members);
    REMOVE_AT(groups, found);
  }
  pthread_mutex_unlock(&state_lock);
  return found >= 0 ? PI_STATUS_SUCCESS : PI_STATUS_TARGET_ERROR;
}

pi_status_t _pi_act_prof_grp_add_mbr(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                     pi_p4_id_t act_prof_id, pi_indirect_handle_t grp_handle,
                                     pi_indirect_handle_t mbr_handle) {
  (void)session_handle;
  pi_status_t status = PI_STATUS_SUCCESS;
  pthread_mutex_lock(&state_lock);
  long found = find_group(dev_id, act_prof_id, grp_handle);
  if (found < 0 || find_member(dev_id, act_prof_id, mbr_handle) < 0) {
    status = PI_STATUS_TARGET_ERROR;
  } else {
    group_t *group = &groups[found];
    pi_indirect_handle_t *more =
        realloc(group->members, (group->count + 1) * sizeof(*group->members));
    if (more == NULL) {
      status = PI_STATUS_ALLOC_ERROR;
    } else {
      group->members = more;
      group->members[group->count++] = mbr_handle;
    }
  }
  pthread_mutex_unlock(&state_lock);
  return status;
}

pi_status_t _pi_act_prof_grp_remove_mbr(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                        pi_p4_id_t act_prof_id, pi_indirect_handle_t grp_handle,
                                        pi_indirect_handle_t mbr_handle) {
  (void)session_handle;
  pi_status_t status = PI_STATUS_TARGET_ERROR;
  pthread_mutex_lock(&state_lock);
  long found = find_group(dev_id, act_prof_id, grp_handle);
  if (found >= 0) {
    group_t *group = &groups[found];
    for (size_t i = 0; i < group->count; i++) {
      if (group->members[i] != mbr_handle) continue;
      memmove(&group->members[i], &group->members[i + 1],
              (group->count - i - 1) * sizeof(*group->members));
      group->count--;
      status = PI_STATUS_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&state_lock);
  return status;
}

pi_status_t _pi_act_prof_grp_set_mbrs(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                      pi_p4_id_t act_prof_id, pi_indirect_handle_t grp_handle,
                                      size_t num_mbrs, const pi_indirect_handle_t *mbr_handles,
                                      const bool *activate) {
  (void)session_handle;
  (void)activate;
  pi_status_t status = PI_STATUS_SUCCESS;
  pthread_mutex_lock(&state_lock);
  long found = find_group(dev_id, act_prof_id, grp_handle);
  pi_indirect_handle_t *copy = malloc((num_mbrs ? num_mbrs : 1) * sizeof(*copy));
  if (found < 0) {
    status = PI_STATUS_TARGET_ERROR;
  } else if (copy == NULL) {
    status = PI_STATUS_ALLOC_ERROR;
  } else {
    if (num_mbrs) memcpy(copy, mbr_handles, num_mbrs * sizeof(*copy));
    free(groups[found].members);
    groups[found].members = copy;
    groups[found].count = num_mbrs;
    copy = NULL;
  }
  free(copy);
  pthread_mutex_unlock(&state_lock);
  return status;
}

/* Members and groups of one profile, or the one member or group with the given handle (an
 * error when there is none). */
static pi_status_t fetch_act_prof(pi_dev_id_t dev, pi_p4_id_t act_prof_id, int want_members,
                                  int want_groups, const pi_indirect_handle_t *handle,
                                  pi_act_prof_fetch_res_t *res) {
  pthread_mutex_lock(&state_lock);
  size_t num_members = 0, members_size = 0, num_groups = 0, num_handles = 0;
  for (size_t i = 0; want_members && i < members_len; i++) {
    const member_t *m = &members[i];
    if (m->dev != dev || m->act_prof != act_prof_id || (handle && m->handle != *handle))
      continue;
    num_members++;
    members_size +=
        sizeof(s_pi_indirect_handle_t) + sizeof(s_pi_p4_id_t) + sizeof(uint32_t) + m->data.size;
  }
  for (size_t i = 0; want_groups && i < groups_len; i++) {
    const group_t *g = &groups[i];
    if (g->dev != dev || g->act_prof != act_prof_id || (handle && g->handle != *handle))
      continue;
    num_groups++;
    num_handles += g->count;
  }
  if (handle != NULL && num_members + num_groups == 0) {  /* asked for one that is not there */
    pthread_mutex_unlock(&state_lock);
    return PI_STATUS_TARGET_ERROR;
  }
  size_t groups_size = num_groups * (sizeof(s_pi_indirect_handle_t) + 2 * sizeof(uint32_t));
  res->num_members = num_members;
  res->num_groups = num_groups;
  res->entries_members_size = members_size;
  res->entries_groups_size = groups_size;
  res->num_cumulated_mbr_handles = num_handles;
  res->entries_members = malloc(members_size ? members_size : 1);
  res->entries_groups = malloc(groups_size ? groups_size : 1);
  res->mbr_handles = malloc((num_handles ? num_handles : 1) * sizeof(pi_indirect_handle_t));
  if (!res->entries_members || !res->entries_groups || !res->mbr_handles) {
    free(res->entries_members);
    free(res->entries_groups);
    free(res->mbr_handles);
    pthread_mutex_unlock(&state_lock);
    return PI_STATUS_ALLOC_ERROR;
  }
  char *out = res->entries_members;
  for (size_t i = 0; want_members && i < members_len; i++) {
    const member_t *m = &members[i];
    if (m->dev != dev || m->act_prof != act_prof_id || (handle && m->handle != *handle))
      continue;
    out += emit_indirect_handle(out, m->handle);
    out += emit_p4_id(out, m->action_id);
    out += emit_uint32(out, (uint32_t)m->data.size);
    if (m->data.size) memcpy(out, m->data.bytes, m->data.size);
    out += m->data.size;
  }
  out = res->entries_groups;
  size_t offset = 0;
  for (size_t i = 0; want_groups && i < groups_len; i++) {
    const group_t *g = &groups[i];
    if (g->dev != dev || g->act_prof != act_prof_id || (handle && g->handle != *handle))
      continue;
    out += emit_indirect_handle(out, g->handle);
    out += emit_uint32(out, (uint32_t)g->count);
    out += emit_uint32(out, (uint32_t)offset);
    for (size_t j = 0; j < g->count; j++) res->mbr_handles[offset++] = g->members[j];
  }
  pthread_mutex_unlock(&state_lock);
  return PI_STATUS_SUCCESS;
}

pi_status_t _pi_act_prof_entries_fetch(pi_session_handle_t session_handle,
                                       pi_dev_tgt_t dev_tgt, pi_p4_id_t act_prof_id,
                                       pi_act_prof_fetch_res_t *res) {
  (void)session_handle;
  return fetch_act_prof(dev_tgt.dev_id, act_prof_id, 1, 1, NULL, res);
}

pi_status_t _pi_act_prof_mbr_fetch(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                   pi_p4_id_t act_prof_id, pi_indirect_handle_t mbr_handle,
                                   pi_act_prof_fetch_res_t *res) {
  (void)session_handle;
  return fetch_act_prof(dev_id, act_prof_id, 1, 0, &mbr_handle, res);
}

pi_status_t _pi_act_prof_grp_fetch(pi_session_handle_t session_handle, pi_dev_id_t dev_id,
                                   pi_p4_id_t act_prof_id, pi_indirect_handle_t grp_handle,
                                   pi_act_prof_fetch_res_t *res) {
  (void)session_handle;
  return fetch_act_prof(dev_id, act_prof_id, 0, 1, &grp_handle, res);
}

pi_status_t _pi_act_prof_entries_fetch_done(pi_session_handle_t session_handle,
                                            pi_act_prof_fetch_res_t *res) {
  (void)session_handle;
  free(res->entries_members);
  free(res->entries_groups);
  free(res->mbr_handles);
  return PI_STATUS_SUCCESS;
}
