/* `coachd seed-demo`: fills the database with demo data for client development
 * (cli/seed_demo.c). */
#pragma once

/* argv[0] is "seed-demo"; returns the exit status (0 seeded or already there, 1 refused or
 * failed, 2 usage). */
int cli_seed_demo(int argc, char **argv);
