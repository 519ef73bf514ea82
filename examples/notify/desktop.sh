#!/bin/sh
# A desktop notification for a batch event: notify-send when there is one, else a line on
# stdout (which batch keeps in batch-logs/notify.log). Reads only the BATCH_* variables
# batch sets (docs/notify.md); the JSON event on stdin is not needed here.
title="batch ${BATCH_EVENT:-event}: ${BATCH_ID:-?}"
body="${BATCH_MESSAGE:-${BATCH_STATE:-}}"
case "$BATCH_EVENT" in
    halt|stall|interrupt) urgency=critical ;;
    *) urgency=normal ;;
esac
if command -v notify-send >/dev/null 2>&1; then
    exec notify-send --urgency="$urgency" --app-name=batch "$title" "$body"
fi
printf '%s\n%s\n' "$title" "$body"
