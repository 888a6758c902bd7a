# etcd's init container (sh -c, arg: MOUNT): etcd keeps its data in MOUNT/data, not at the root of the
# volume (where a filesystem's lost+found or a stray file would make etcd refuse the directory). A volume
# from an older release holds MOUNT/member: move it into MOUNT/data once, before etcd starts.
set -eu
mount=$1
if [ -d "$mount/member" ] && [ ! -e "$mount/data/member" ]; then
  mkdir -p "$mount/data"
  chmod 700 "$mount/data"
  mv "$mount/member" "$mount/data/member"
  echo "moved $mount/member to $mount/data/member"
fi
mkdir -p "$mount/data"
chmod 700 "$mount/data"
