/** `role-based-email-addresses` ships no types: its export is the list of role local parts. */
declare module 'role-based-email-addresses' {
  const roles: string[];
  export = roles;
}
