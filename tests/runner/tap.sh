# shellcheck shell=bash
# TAP counting for tests/run-tests.sh, sourced (and checked by tests/runner/selftest.sh).
#
#   tap_count SUITE FILE STATUS   add one finished TAP stream to the totals
#   tap_fail_one MESSAGE          count a failure that has no TAP line of its own
#   tap_summary                   print "N passed, N failed[, N skipped]"; false when failed > 0
#
# A stream only counts as green when it proves it ran everything: its plan
# ("1..N", one per cmocka group, one up front for bats) must be there, every
# planned test must have a result line, and its producer must have exited 0.
# Whatever is missing is a failure, printed as a "not ok - SUITE: ..." line, so
# a file that fails to load, a crash half-way or a killed run can never end
# "N passed, 0 failed".

tap_pass=0
tap_fail=0
tap_skip=0

# With CI=true these skip reasons (tests/bats/helpers.bash, requires_fuse; nbd.bats) are failures:
# a CI machine that cannot run the integration tests must not look green.
tap_ci_fatal_skips=(
	'NBD: *'
	'needs root*'
	'no /dev/fuse*'
	'tagdiskd is not built*'
	'TD_TRANSPORT=uring: *'
	'Ceph: *'
)

tap_fail_one() { # message
	echo "not ok - $1"
	tap_fail=$((tap_fail + 1))
}

# Is skip reason $1 one that CI=true turns into a failure?
tap_ci_fatal() { # reason
	local pat

	[ "${CI:-}" = true ] || return 1
	for pat in "${tap_ci_fatal_skips[@]}"; do
		# shellcheck disable=SC2254 # $pat is a glob on purpose
		case "$1" in $pat) return 0 ;; esac
	done
	return 1
}

# Count stream FILE of SUITE, whose producer exited with STATUS. The stream's own
# counts are left in tap_p, tap_f and tap_s; returns 1 when it failed in any way.
tap_count() { # suite file status
	local suite=$1 file=$2 status=$3
	local line name reason planned=0 plans=0 results=0 bailed=0
	local re_plan='^1\.\.([0-9]+)([[:space:]].*)?$'
	local re_result='^(not )?ok([[:space:]]|$)'
	# "# skip REASON" (bats) or "# SKIP name" (cmocka), in any case, as TAP allows.
	local re_skip='[[:space:]]#[[:space:]]*[Ss][Kk][Ii][Pp]([^[:alnum:]_](.*))?$'

	tap_p=0 tap_f=0 tap_s=0
	if [ -r "$file" ]; then
		while IFS= read -r line || [ -n "$line" ]; do
			if [[ $line =~ $re_plan ]]; then
				planned=$((planned + BASH_REMATCH[1]))
				plans=$((plans + 1))
			elif [[ $line == 'Bail out!'* ]]; then
				bailed=1
			elif [[ $line =~ $re_result ]]; then
				results=$((results + 1))
				if [[ $line =~ $re_skip ]]; then
					reason=${BASH_REMATCH[2]}
					reason=${reason#"${reason%%[![:space:]]*}"}
					if tap_ci_fatal "$reason"; then
						name=${line%% # *}
						echo "not ok - $suite: ${name#ok } was skipped ($reason);" \
							"with CI=true that is a failure: CI must have root, /dev/fuse, tagdiskd, Ceph and nbdkit"
						tap_f=$((tap_f + 1))
					else
						tap_s=$((tap_s + 1))
					fi
				elif [[ $line == 'not '* ]]; then
					tap_f=$((tap_f + 1))
				else
					tap_p=$((tap_p + 1))
				fi
			fi
		done <"$file"
	fi

	if [ $plans -eq 0 ]; then
		echo "not ok - $suite: no TAP plan (1..N) in its output ($results results)"
		tap_f=$((tap_f + 1))
	elif [ $results -lt $planned ]; then
		echo "not ok - $suite: $((planned - results)) of $planned planned results missing"
		tap_f=$((tap_f + planned - results))
	elif [ $results -gt $planned ]; then
		echo "not ok - $suite: $results results but only $planned planned"
		tap_f=$((tap_f + 1))
	fi
	if [ $bailed -eq 1 ]; then
		echo "not ok - $suite: bailed out"
		tap_f=$((tap_f + 1))
	fi
	# A crash, a sanitizer or valgrind error, or a runner that gave up: the exit status
	# may be the only sign. It needs a failure of its own unless a "not ok" already says so.
	if [ "$status" -ne 0 ]; then
		if [ $tap_f -eq 0 ]; then
			echo "not ok - $suite: exited with status $status without reporting a failure"
			tap_f=1
		else
			echo "# $suite exited with status $status"
		fi
	fi

	tap_pass=$((tap_pass + tap_p))
	tap_fail=$((tap_fail + tap_f))
	tap_skip=$((tap_skip + tap_s))
	[ $tap_f -eq 0 ]
}

tap_summary() {
	if [ $tap_skip -gt 0 ]; then
		echo "$tap_pass passed, $tap_fail failed, $tap_skip skipped"
	else
		echo "$tap_pass passed, $tap_fail failed"
	fi
	[ $tap_fail -eq 0 ]
}
