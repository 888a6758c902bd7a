# etcd's init container (sh -c, arg: MOUNT; env ETCD_MEMBERS_DIR, POD_NAME): etcd keeps its data in MOUNT/data, not at the root of
# the volume (where a filesystem's lost+found or a stray file would make etcd refuse the directory). A volume
# from an older release holds MOUNT/member: move it into MOUNT/data once, before etcd starts.
# ETCD_MEMBERS_DIR (the operator's ConfigMap, mounted): when it names the id the operator added this pod's member under
# (id.$POD_NAME: a scale-out, or a member removed and added again) and this volume was written for another
# (MOUNT/member-id), the data is a removed member's: it goes, and etcd joins as the new member.
set -eu
mount=$1
members=${ETCD_MEMBERS_DIR:-}
if [ -n "$members" ] && [ -f "$members/id.${POD_NAME:-}" ]; then
  id=$(cat "$members/id.$POD_NAME")
  if [ "$(cat "$mount/member-id" 2>/dev/null || true)" != "$id" ]; then
    rm -rf "$mount/data"
    echo "$id" > "$mount/member-id"
    echo "emptied $mount/data: this pod's member was added under id $id"
  fi
fi
if [ -d "$mount/member" ] && [ ! -e "$mount/data/member" ]; then
  mkdir -p "$mount/data"
  chmod 700 "$mount/data"
  mv "$mount/member" "$mount/data/member"
  echo "moved $mount/member to $mount/data/member"
fi
mkdir -p "$mount/data"
chmod 700 "$mount/data"
