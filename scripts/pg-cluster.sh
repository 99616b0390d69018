# A throwaway PostgreSQL cluster on a free loopback port, for scripts/test and the benchmarks. Source this file,
# then `pg_start` (sets pg_port and pg_work; installs Debian's postgresql when initdb is missing) and `pg_stop`.
# PostgreSQL refuses to run as root, so its tools run as the postgres OS user then.

pg_find_bin() {
    local dir
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return
    fi
    for dir in /usr/lib/postgresql/*/bin; do
        [ -x "$dir/initdb" ] && { echo "$dir"; return; }
    done
    return 1
}

pg_as_postgres() {
    if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi
}

# Installs PostgreSQL when missing; sets pg_bin.
pg_install() {
    if ! pg_bin=$(pg_find_bin); then
        printf '==> %s\n' "initdb not found: installing Debian's postgresql package" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
        pg_bin=$(pg_find_bin)
    fi
}

# Starts a cluster in a new folder under /tmp (fsync off: it is thrown away); sets pg_port and pg_work.
pg_start() {
    pg_install
    pg_work=$(mktemp -d /tmp/gatehouse-pg.XXXXXX)
    chmod 755 "$pg_work"
    if [ "$(id -u)" = 0 ]; then chown postgres "$pg_work"; fi
    pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    printf '==> %s\n' "starting PostgreSQL on 127.0.0.1:$pg_port ($pg_bin)" >&2
    pg_as_postgres "'$pg_bin/initdb' -D '$pg_work/data' -U gatehouse -A trust -E UTF8 --no-locale" \
        >"$pg_work/initdb.log" 2>&1 || { cat "$pg_work/initdb.log"; return 1; }
    pg_as_postgres "'$pg_bin/pg_ctl' -D '$pg_work/data' -l '$pg_work/postgres.log' -w -t 60 \
        -o \"-p $pg_port -k '$pg_work' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=1000 -c shared_buffers=64MB\" start" \
        >/dev/null || { cat "$pg_work/postgres.log"; return 1; }
}

# Stops the cluster and removes its folder (safe to call twice, or before pg_start).
pg_stop() {
    if [ -n "${pg_work:-}" ]; then
        pg_as_postgres "'$pg_bin/pg_ctl' -D '$pg_work/data' -m immediate stop" >/dev/null 2>&1 || true
        rm -rf "$pg_work"
        pg_work=""
    fi
}
