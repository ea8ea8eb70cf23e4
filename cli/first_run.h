/* `coachd first-run`: creates the first PlatformAdmin from the command line (cli/first_run.c). */
#pragma once

/* argv[0] is "first-run"; returns the exit status (0 created, 1 refused or failed, 2 usage). */
int cli_first_run(int argc, char **argv);
