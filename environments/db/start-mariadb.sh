#!/bin/bash
# Starts MariaDB as the unprivileged `mysql` user on a fresh tmpfs data directory, reachable
# only through the unix socket /run/agentrl/mysqld.sock. SQL mode and group_concat_max_len are
# MySQL 8's defaults (the original ran mysql:8), so table hashes and errors match. AGENTRL_DB_PASSWORD is the
# password of the `agentrl` admin account the task family connects with to make one database
# and one user per session (agents never get it). Sandbox: file import/export only in an
# empty read-only folder (secure_file_priv), every statement stopped after
# AGENTRL_DB_STATEMENT_SECONDS (default 60; session users get their own limit too).
# Space: every table agents make is MyISAM (enforce-storage-engine), so its files live in its
# database's folder only (the task family links each session's folder to a tmpfs of its own);
# InnoDB is not offered to them (a full file system ends the whole server) and Aria's log is
# shared. Statements' temporary files go to /var/lib/agentrl-db-tmp (a tmpfs of its own).
set -euo pipefail
DATA=/var/lib/agentrl-mysql
SOCKET_DIR=/run/agentrl
: "${AGENTRL_DB_PASSWORD:?AGENTRL_DB_PASSWORD must be set}"
mariadb-install-db --no-defaults --datadir="$DATA" --auth-root-authentication-method=socket \
  --skip-test-db >/tmp/install.log 2>&1 || { cat /tmp/install.log; exit 1; }
cat > /tmp/init.sql <<SQL
CREATE USER IF NOT EXISTS 'agentrl'@'localhost' IDENTIFIED BY '${AGENTRL_DB_PASSWORD}';
GRANT ALL PRIVILEGES ON *.* TO 'agentrl'@'localhost' WITH GRANT OPTION;
FLUSH PRIVILEGES;
SQL
STATEMENT_SECONDS="${AGENTRL_DB_STATEMENT_SECONDS:-60}"
exec mariadbd --no-defaults --datadir="$DATA" --socket="$SOCKET_DIR/mysqld.sock" \
  --skip-networking --init-file=/tmp/init.sql --pid-file=/tmp/mysqld.pid \
  --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
  --max-connections=1000 --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=0 \
  --innodb-log-file-size=64M --skip-log-bin --log-error=/tmp/mysqld.err --group-concat-max-len=1024 \
  --enforce-storage-engine=MyISAM --default-storage-engine=MyISAM --default-tmp-storage-engine=MyISAM \
  --tmpdir=/var/lib/agentrl-db-tmp \
  --secure-file-priv=/var/lib/agentrl-no-files --max-statement-time="$STATEMENT_SECONDS" --local-infile=0 \
  --sql-mode="ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
