# shellcheck shell=bash
# refenv/lib/api.sh: the API and log helpers the refenv scripts share, sourced by
# refenv/lib/capture.sh (the capture scripts) and refenv/scenario.sh:
#
#   API=http://127.0.0.1:9262/v2.0   # the server's API (noauth)
#   PROJ=demo                        # its project (X-Project-Id)
#   LOG_NAME=qos_capture             # optional: log's prefix
#   LOG_FD=1                         # optional: log's descriptor (2 unless told)
#   . "$HERE/lib/api.sh"
#
# api method path [json]: curl of the API (fails on an HTTP error), the body on stdout;
# log words...: one line, [<LOG_NAME> hh:mm:ss.mmm] words.

log() { echo "[${LOG_NAME:+$LOG_NAME }$(date +%T.%3N)] $*" >&"${LOG_FD:-2}"; }
api() { # method path [json]
  local m=$1 p=$2 d=${3:-}
  if [ -n "$d" ]; then
    curl -sS -f -X "$m" -H 'Content-Type: application/json' -H "X-Project-Id: $PROJ" -d "$d" "$API$p"
  else
    curl -sS -f -X "$m" -H "X-Project-Id: $PROJ" "$API$p"
  fi
}
