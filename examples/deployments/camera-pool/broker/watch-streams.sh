#!/bin/sh
# Prints the stream URIs of every camera this container holds, from devlet's live file,
# and again whenever they change: a camera's new address, a camera gone or back. The
# environment keeps the values the container started with; the file does not.
# Each view is a line "generation N", then one line per camera:
#   <instance> <present|gone> <stream URI>...
# Pipe it into the program that opens the streams. Needs jq; inotifywait
# (inotify-tools) if there, else the file is read every DEVLET_POLL_SECONDS (2).
set -u
file=${DEVLET_INFO_FILE:?not set: the container holds no devlet device}

view() {
    jq -r 'if .schemaVersion != 1 then error("unknown live-file schema \(.schemaVersion)") else
        "generation \(.generation)", (.devices[] | [.instance, .health] + (.properties
            | to_entries | map(select(.key | test("^ONVIF_STREAM_[0-9]+_URI$")))
            | sort_by(.key | ltrimstr("ONVIF_STREAM_") | rtrimstr("_URI") | tonumber)
            | map(.value)) | join(" ")) end' "$file"
}

# Prints a view when its cameras differ from the last one printed.
nl='
'
last=
show() {
    now=$(view) || exit 1
    cameras=${now#*"$nl"}
    [ "$cameras" = "$last" ] && return
    last=$cameras
    printf '%s\n' "$now"
}

show
if command -v inotifywait >/dev/null; then
    # devlet renames each new file into place: watch the directory, not the file. Read
    # again once the watch is set, so that no change falls between the two.
    inotifywait -m -e moved_to --format %f "${file%/*}" 2>&1 | while read -r event; do
        case $event in
        "Watches established." | "${file##*/}") show ;;
        "Setting up watches.") ;;
        *) printf '%s\n' "$event" >&2 ;;
        esac
    done
else
    while sleep "${DEVLET_POLL_SECONDS:-2}"; do show; done
fi
