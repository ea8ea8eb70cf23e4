/* `coachd end-sessions`: ends every session of every user, or of one account (cli/end_sessions.c).
 */
#pragma once

/* argv[0] is "end-sessions"; returns the exit status (0 done, 1 failed, 2 usage). */
int cli_end_sessions(int argc, char **argv);
