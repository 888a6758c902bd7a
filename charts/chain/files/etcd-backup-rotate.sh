# The etcd backup CronJob's last step (sh -c, args: DIR RETENTION): name the snapshot the earlier steps wrote
# to DIR/.partial.db by its UTC time, then keep the RETENTION newest etcd-*.db and remove the rest.
set -eu
dir=$1 keep=$2
[ -s "$dir/.partial.db" ] || { echo "no snapshot in $dir/.partial.db" >&2; exit 1; }
name="etcd-$(date -u +%Y%m%dT%H%M%SZ).db"
mv "$dir/.partial.db" "$dir/$name"
echo "saved $dir/$name"
ls -1 "$dir" | grep '^etcd-.*\.db$' | sort -r | tail -n +"$((keep + 1))" | while read -r old; do
  rm -f "$dir/$old" && echo "removed $dir/$old"
done
