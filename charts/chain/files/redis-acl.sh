# Redis's ACL file from the password file: the default user, every key, channel and command, that password.
# $1 the password file, $2 the ACL file to write. The password never reaches a command line.
set -eu
umask 077
password=$(cat "$1")
case "$password" in
  *[[:space:]]*|'') echo "redis-acl: the password in $1 is empty or holds whitespace" >&2; exit 1 ;;
esac
printf 'user default on >%s ~* &* +@all\n' "$password" > "$2"
