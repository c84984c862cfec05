# bash completion for mcp-chain(1): its commands, options and their values;
# file names where a file goes (JSON files for a configuration).
# Installed as share/bash-completion/completions/mcp-chain.

_mcp_chain()
{
	local cur prev words cword
	_init_completion || return

	case $prev in
	-c | --config)
		_filedir json
		return
		;;
	--log-file | --record)
		_filedir
		return
		;;
	-l | --log-level)
		COMPREPLY=($(compgen -W 'error warn info debug' -- "$cur"))
		return
		;;
	--listen | --flow)
		COMPREPLY=($(compgen -W '- 127.0.0.1: [::1]:' -- "$cur"))
		[[ ${COMPREPLY-} == *: ]] && compopt -o nospace
		return
		;;
	--timeout)
		return
		;;
	esac

	# the command: the first word that is not an option or an option's value
	local i cmd='' sub=''
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-c | --config | --log-file | --record | -l | --log-level | --listen | --flow | --timeout)
			((i++))
			;;
		-*) ;;
		*)
			if [[ -z $cmd ]]; then
				cmd=${words[i]}
			elif [[ -z $sub ]]; then
				sub=${words[i]}
			fi
			;;
		esac
	done

	case $cmd in
	'')
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W '--config --listen --flow --log-level --log-file --record
				--direct --version --help' -- "$cur"))
		else
			COMPREPLY=($(compgen -W 'check audit list call read prompt auth replay schema' \
				-- "$cur"))
		fi
		;;
	check)
		[[ -z $sub ]] && _filedir json
		;;
	audit)
		if [[ -z $sub ]]; then
			COMPREPLY=($(compgen -W 'verify' -- "$cur"))
		else
			_filedir
		fi
		;;
	replay)
		[[ -z $sub ]] && _filedir
		;;
	auth)
		if [[ -z $sub ]]; then
			COMPREPLY=($(compgen -W 'login status logout' -- "$cur"))
		elif [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W '--config' -- "$cur"))
		fi
		;;
	list | call | read | prompt)
		[[ $cur == -* ]] &&
			COMPREPLY=($(compgen -W '--config --json --timeout -v' -- "$cur"))
		;;
	esac
} &&
	complete -F _mcp_chain mcp-chain
